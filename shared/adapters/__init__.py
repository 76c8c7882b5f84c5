"""The adapters: the only code in shared/ that opens a connection.

``db`` (the SQL ledger, its tables, migrations and the settlement
transaction), ``leases`` (the Redis claim leases) and ``broker`` (RabbitMQ).
"""
