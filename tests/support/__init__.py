"""Helpers the tests share and nothing else imports: export writers, a PromQL oracle, report truth."""
