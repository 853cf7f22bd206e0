# The Protocol V3 conformance kit: a cable end, the organ rules, the master rules, the report.
