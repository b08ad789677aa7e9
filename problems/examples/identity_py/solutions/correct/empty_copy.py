def custom_kernel(data):
    out = data.new_empty(data.shape)
    out.copy_(data)
    return out
