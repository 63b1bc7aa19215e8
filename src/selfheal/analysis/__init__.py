"""Analysis: the tidy tables (``tables``), statistics (``stats``) and plots (``plots``, names in ``FIGURES``),
read only from the Parquet tables and records the workflow wrote."""
