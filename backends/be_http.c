/* be_http.c - being written. */
