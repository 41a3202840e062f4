/* remote.c - being written. */
