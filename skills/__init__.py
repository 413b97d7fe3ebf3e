"""The domain: plain async functions over typed inputs and outputs, talking out only through ports."""
