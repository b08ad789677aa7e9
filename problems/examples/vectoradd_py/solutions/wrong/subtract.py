def custom_kernel(data):
    a, b = data
    return a - b
