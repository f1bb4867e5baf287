/* An empty shared object: a harmless LD_PRELOAD for the tests of `tokprof run`. */
int tkp_test_noop_preload;
