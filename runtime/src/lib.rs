//! The Tessera runtime: host tensors, dtypes, `.npy` files, seeded random numbers.
