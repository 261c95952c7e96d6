//! The example OS, end to end (being written).
