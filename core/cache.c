/* cache.c - being written. */
