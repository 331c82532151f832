//! Edge TPU target (TFLite export, Edge TPU rules, devices: not yet implemented, see issues 3 and 5).
