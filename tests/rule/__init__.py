"""The quota and admission rules as pure functions: admission, reclaim, placement, the
quota figures, quantities, their Hypothesis properties, and the estimates and waiting
reasons replayed from them on hand-built trees."""
