"""Each backend's migrations as one ordered list, each carrying its own SQL (and, where it must
compute, its own frozen code in `legacy`)."""
