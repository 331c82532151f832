//! Graph optimisation passes.
