# Correct: the Hillis-Steele scan, log2(size) rounds of shifted additions in float32.


def custom_kernel(data):
    out = data.clone()
    distance = 1
    while distance < out.shape[0]:
        shifted = out.clone()
        shifted[distance:] += out[:-distance]
        out = shifted
        distance *= 2
    return out
