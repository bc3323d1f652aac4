"""Example Python migrations for the template's ledger app (see ``totals``)."""
