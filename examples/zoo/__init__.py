"""The mixer zoo: well-known sequence mixers as external models (issue 50), each from its paper."""
