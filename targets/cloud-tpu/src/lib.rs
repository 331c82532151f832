//! Cloud TPU target (StableHLO lowering and PJRT runtime: not yet implemented, see issue 4).
