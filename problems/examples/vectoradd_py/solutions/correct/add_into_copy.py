def custom_kernel(data):
    a, b = data
    out = a.clone()
    out += b
    return out
