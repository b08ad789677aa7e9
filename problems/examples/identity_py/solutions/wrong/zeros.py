# Wrong: right shape, dtype and device, wrong values.


def custom_kernel(data):
    return data.new_zeros(data.shape)
