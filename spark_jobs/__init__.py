"""PySpark jobs over zaqar-lite stores."""
