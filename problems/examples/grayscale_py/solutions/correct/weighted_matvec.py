# Correct: one matrix-vector product over the channel axis.


def custom_kernel(data):
    weights = data.new_tensor([0.2989, 0.5870, 0.1140])
    return data @ weights
