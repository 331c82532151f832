//! TFLite export of f32 core graphs (being written).
