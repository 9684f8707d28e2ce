"""Plain records and text every room shares: records, statuses, parameters, formulas, untrusted text.
May import: nothing."""
