"""The store: the Database interface and its two drivers (SQLite, PostgreSQL), the dialect's
fragments, each backend's migrations, and the plain records every floor keeps (request
bindings, pages, remembered answers, attachment bytes, a worker's presence). It knows nothing
of invoices, leases or the web."""
