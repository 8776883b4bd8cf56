/* Keeps the client library target non-empty until its sources exist. */
