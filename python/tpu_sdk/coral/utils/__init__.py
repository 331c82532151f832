"""pycoral.utils: ``edgetpu`` (make_interpreter, list_edge_tpus, run_inference) and ``dataset``."""
