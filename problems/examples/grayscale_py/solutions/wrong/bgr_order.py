# Wrong: reads the channels as BGR, so the red and blue weights are swapped.


def custom_kernel(data):
    b, g, r = data.unbind(dim=-1)
    return 0.2989 * r + 0.5870 * g + 0.1140 * b
