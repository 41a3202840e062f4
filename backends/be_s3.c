/* be_s3.c - being written. */
