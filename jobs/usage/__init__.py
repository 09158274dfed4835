"""The quota tree's usage over time: the samples beat records, their series and charts."""
