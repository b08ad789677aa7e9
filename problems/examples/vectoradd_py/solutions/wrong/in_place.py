# Wrong: adds in place and returns the first input, which aliases an input buffer.


def custom_kernel(data):
    a, b = data
    a.add_(b)
    return a
