"""Pure rules beside admission's: ties within noise, the GPUs' roofline floor, display names, signed artifact links."""
