"""Torch C++/CUDA extensions as their repositories build them: read statically (spec), built with
torch.utils.cpp_extension once per node."""
