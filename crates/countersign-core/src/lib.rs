//! Countersign core.
