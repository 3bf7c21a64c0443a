"""Layer 0: what the package keeps on disk across processes, and how it is trusted.

- :mod:`~pymc_odesens.caching.disk_cache`: the cache directory (private, owner-checked),
  atomic writes, and artefacts that are verified before use
  (:class:`~pymc_odesens.caching.disk_cache.KernelCacheWarning`,
  :class:`~pymc_odesens.caching.disk_cache.KernelCacheError`);
- :mod:`~pymc_odesens.caching.verified_file`: the framing of a cached file (its SHA-256
  digest, length and name);
- :mod:`~pymc_odesens.caching.numba_cache_guard` and
  :mod:`~pymc_odesens.caching.numba_cache_verification`: numba's own cache files of the
  package's functions, dropped when the sources change and verified before numba loads them;
- :mod:`~pymc_odesens.caching.compile_notice`: a notice on stderr, with a heartbeat, for any
  compile that runs longer than a moment (what a cache spares the next process).

It imports nothing else of the package, so every layer may use it.
"""
