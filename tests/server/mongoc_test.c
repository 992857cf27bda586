/* The C driver (libmongoc 1.23, Debian 12) against `mmdoc serve`: CRUD, a
 * cursor over many batches, indexes, a duplicate key's code 11000, w:0 and
 * j:true writes. Run by run_with_server.py with the server's URI as argv[1];
 * exits 1 naming the first check that failed. */
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>

static int failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "mongoc_test:%d: FAILED: %s: ", __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      failures++;                                          \
    }                                                      \
  } while (0)

static int64_t reply_int(const bson_t *reply, const char *key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, reply, key)) return -1;
  return bson_iter_as_int64(&it);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mongoc_test URI\n");
    return 2;
  }
  mongoc_init();
  bson_error_t error;
  mongoc_uri_t *uri = mongoc_uri_new_with_error(argv[1], &error);
  if (!uri) {
    fprintf(stderr, "bad URI %s: %s\n", argv[1], error.message);
    return 2;
  }
  mongoc_client_t *client = mongoc_client_new_from_uri(uri);
  mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
  mongoc_client_set_appname(client, "mmdoc-mongoc-test");

  bson_t *ping = BCON_NEW("ping", BCON_INT32(1));
  bool ok = mongoc_client_command_simple(client, "admin", ping, NULL, NULL, &error);
  CHECK(ok, "ping: %s", error.message);
  bson_destroy(ping);

  mongoc_collection_t *coll = mongoc_client_get_collection(client, "ctest", "things");
  mongoc_collection_drop(coll, NULL); /* "ns not found" the first time */

  /* insert_many: 1000 documents in one command */
  enum { N = 1000 };
  bson_t *docs[N];
  for (int i = 0; i < N; i++) docs[i] = BCON_NEW("_id", BCON_INT32(i), "k", BCON_INT32(i % 10));
  bson_t reply;
  ok = mongoc_collection_insert_many(coll, (const bson_t **)docs, N, NULL, &reply, &error);
  CHECK(ok, "insert_many: %s", error.message);
  CHECK(reply_int(&reply, "insertedCount") == N, "insertedCount %lld",
        (long long)reply_int(&reply, "insertedCount"));
  bson_destroy(&reply);
  for (int i = 0; i < N; i++) bson_destroy(docs[i]);

  /* find: a cursor over many batches (batchSize 7), sorted descending */
  bson_t *filter = BCON_NEW("_id", "{", "$gte", BCON_INT32(100), "}");
  bson_t *opts = BCON_NEW("batchSize", BCON_INT32(7), "sort", "{", "_id", BCON_INT32(-1), "}");
  mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
  const bson_t *doc;
  int seen = 0;
  int32_t expect = N - 1;
  while (mongoc_cursor_next(cursor, &doc)) {
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, doc, "_id") && bson_iter_int32(&it) == expect,
          "document %d out of order", seen);
    expect--;
    seen++;
  }
  CHECK(!mongoc_cursor_error(cursor, &error), "cursor: %s", error.message);
  CHECK(seen == N - 100, "find returned %d documents", seen);
  mongoc_cursor_destroy(cursor);
  bson_destroy(filter);
  bson_destroy(opts);

  /* count_documents (the aggregate form) */
  filter = BCON_NEW("k", BCON_INT32(3));
  int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &error);
  CHECK(n == N / 10, "count_documents k=3: %lld (%s)", (long long)n, error.message);
  bson_destroy(filter);

  /* update_many and an upsert */
  filter = BCON_NEW("k", BCON_INT32(3));
  bson_t *update = BCON_NEW("$set", "{", "tag", BCON_UTF8("three"), "}");
  ok = mongoc_collection_update_many(coll, filter, update, NULL, &reply, &error);
  CHECK(ok, "update_many: %s", error.message);
  CHECK(reply_int(&reply, "modifiedCount") == N / 10, "modifiedCount %lld",
        (long long)reply_int(&reply, "modifiedCount"));
  bson_destroy(&reply);
  bson_destroy(filter);
  bson_destroy(update);
  filter = BCON_NEW("_id", BCON_INT32(5000));
  update = BCON_NEW("$set", "{", "k", BCON_INT32(77), "}");
  opts = BCON_NEW("upsert", BCON_BOOL(true));
  ok = mongoc_collection_update_one(coll, filter, update, opts, &reply, &error);
  CHECK(ok, "upsert: %s", error.message);
  CHECK(reply_int(&reply, "upsertedCount") == 1, "upsertedCount %lld",
        (long long)reply_int(&reply, "upsertedCount"));
  bson_destroy(&reply);
  bson_destroy(filter);
  bson_destroy(update);
  bson_destroy(opts);

  /* delete_many */
  filter = BCON_NEW("k", BCON_INT32(9));
  ok = mongoc_collection_delete_many(coll, filter, NULL, &reply, &error);
  CHECK(ok, "delete_many: %s", error.message);
  CHECK(reply_int(&reply, "deletedCount") == N / 10, "deletedCount %lld",
        (long long)reply_int(&reply, "deletedCount"));
  bson_destroy(&reply);
  bson_destroy(filter);

  /* createIndexes (unique, on a new collection: MongoDB too counts a missing
   * field as null, twice), then a duplicate key is error 11000 */
  mongoc_collection_destroy(coll);
  coll = mongoc_client_get_collection(client, "ctest", "people");
  bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8("people"), "indexes", "[", "{", "key", "{",
                         "name", BCON_INT32(1), "}", "name", BCON_UTF8("name_1"), "unique",
                         BCON_BOOL(true), "}", "]");
  mongoc_database_t *database = mongoc_client_get_database(client, "ctest");
  ok = mongoc_database_write_command_with_opts(database, cmd, NULL, &reply, &error);
  CHECK(ok, "createIndexes: %s", error.message);
  bson_destroy(&reply);
  bson_destroy(cmd);
  bson_t *a = BCON_NEW("_id", BCON_UTF8("a"), "name", BCON_UTF8("ada"));
  bson_t *b = BCON_NEW("_id", BCON_UTF8("b"), "name", BCON_UTF8("ada"));
  ok = mongoc_collection_insert_one(coll, a, NULL, NULL, &error);
  CHECK(ok, "insert a: %s", error.message);
  ok = mongoc_collection_insert_one(coll, b, NULL, NULL, &error);
  CHECK(!ok && error.code == 11000, "duplicate unique key gave ok=%d code %u: %s", ok,
        error.code, error.message);
  ok = mongoc_collection_insert_one(coll, a, NULL, NULL, &error);
  CHECK(!ok && error.code == 11000, "duplicate _id gave ok=%d code %u: %s", ok, error.code,
        error.message);
  bson_destroy(a);
  bson_destroy(b);

  /* listIndexes through the driver's cursor */
  cursor = mongoc_collection_find_indexes_with_opts(coll, NULL);
  int indexes = 0;
  while (mongoc_cursor_next(cursor, &doc)) indexes++;
  CHECK(!mongoc_cursor_error(cursor, &error), "listIndexes: %s", error.message);
  CHECK(indexes == 2, "listIndexes gave %d indexes", indexes);
  mongoc_cursor_destroy(cursor);

  /* an unknown command: CommandNotFound (59), not a hang */
  cmd = BCON_NEW("frobnicate", BCON_INT32(1));
  ok = mongoc_client_command_simple(client, "ctest", cmd, NULL, NULL, &error);
  CHECK(!ok && error.code == 59, "unknown command gave ok=%d code %u", ok, error.code);
  bson_destroy(cmd);

  /* w:0 (no reply) writes, then j:true; the same connection sees both */
  mongoc_collection_t *w0 = mongoc_client_get_collection(client, "ctest", "w0");
  mongoc_write_concern_t *wc = mongoc_write_concern_new();
  mongoc_write_concern_set_w(wc, 0);
  mongoc_collection_set_write_concern(w0, wc);
  for (int i = 0; i < 200; i++) {
    bson_t *d = BCON_NEW("i", BCON_INT32(i));
    ok = mongoc_collection_insert_one(w0, d, NULL, NULL, &error);
    CHECK(ok, "w:0 insert: %s", error.message);
    bson_destroy(d);
  }
  mongoc_write_concern_set_w(wc, 1);
  mongoc_write_concern_set_journal(wc, true);
  mongoc_collection_set_write_concern(w0, wc);
  bson_t *d = BCON_NEW("i", BCON_INT32(200));
  ok = mongoc_collection_insert_one(w0, d, NULL, NULL, &error);
  CHECK(ok, "j:true insert: %s", error.message);
  bson_destroy(d);
  bson_t empty = BSON_INITIALIZER;
  n = mongoc_collection_count_documents(w0, &empty, NULL, NULL, NULL, &error);
  CHECK(n == 201, "w0 holds %lld documents (%s)", (long long)n, error.message);
  mongoc_write_concern_destroy(wc);
  mongoc_collection_destroy(w0);

  mongoc_database_destroy(database);
  mongoc_collection_destroy(coll);
  mongoc_client_destroy(client);
  mongoc_uri_destroy(uri);
  mongoc_cleanup();
  if (failures == 0) printf("mongoc_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
