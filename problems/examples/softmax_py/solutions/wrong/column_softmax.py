# Wrong: normalizes over the columns of the matrix instead of its rows.


def custom_kernel(data):
    return data.softmax(dim=0)
