# Wrong: a precision downgrade. Accumulating in float16 loses far more than the float32 tolerance allows.


def custom_kernel(data):
    return data.half().cumsum(dim=0).float()
