"""Side experiments: Tamkin et al. 2020 transfer finetuning and probing (``transfer``), Bogoychev 2021 frozen random
components (``frozen_random``)."""
