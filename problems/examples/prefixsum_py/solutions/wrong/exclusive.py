# Wrong: an exclusive scan (out[i] sums x[0..i-1]) is off by one element everywhere.


def custom_kernel(data):
    out = data.new_zeros(data.shape)
    out[1:] = data[:-1].cumsum(dim=0)
    return out
