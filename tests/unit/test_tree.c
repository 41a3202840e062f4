/*
 * test_tree.c - the gateway tree: views, node paths, renames, forgets and
 * the attributes the kernel sees, over a fake backend.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend.h"
#include "be_fake.h"
#include "fs.h"

static const char tree_conf[] =
	"[datastore store]\n"
	"type = fake\n"
	"mode = 640\n"
	"uid = 1234\n"
	"[dataset PASCAL VOC]\n"
	"source = store:/data/voc/\n"
	"[checkpoint resnet]\n"
	"source = store:/ckpt\n";

static int setup(void **state)
{
	struct mlfs_config *cfg = NULL;
	struct fs *fs = NULL;
	struct diag d;

	diag_init(&d);
	if (config_parse(&cfg, "tree.conf", tree_conf, strlen(tree_conf), backend_config_forms(), &d) < 0 ||
	    fs_create(&fs, cfg) < 0) {
		diag_print(&d, stderr);
		diag_free(&d);
		config_free(cfg);
		return -1;
	}
	diag_free(&d);
	*state = fs;
	return 0;
}

static int teardown(void **state)
{
	fs_destroy(*state);
	return 0;
}

static struct node *child(struct node *dir, const char *name)
{
	struct node *n = fs_vdir_child(dir, name);

	assert_non_null(n);
	return n;
}

static void assert_path(struct fs *fs, struct node *n, const char *name, const char *want)
{
	char *path = NULL;

	assert_int_equal(fs_node_path(fs, n, name, &path), 0);
	assert_string_equal(path, want);
	free(path);
}

static void test_tree_has_the_design_folders_and_views(void **state)
{
	struct fs *fs = *state;

	assert_int_equal(fs->root->nentries, 6);
	child(child(fs->root, "datastores"), "store");
	child(child(fs->root, "datasets"), "PASCAL_VOC");
	child(child(fs->root, "checkpoints"), "resnet");
	assert_int_equal(child(fs->root, "models")->nentries, 0);
	assert_int_equal(child(fs->root, "jobs")->kind, NODE_JOBS);
	assert_int_equal(child(child(fs->root, ".mlfs"), "node")->kind, NODE_VFILE);
}

static void test_tree_maps_view_paths_into_the_backend(void **state)
{
	struct fs *fs = *state;
	struct node *store = child(child(fs->root, "datastores"), "store");
	struct node *voc = child(child(fs->root, "datasets"), "PASCAL_VOC");
	struct node *a, *b;

	assert_true(voc->view->readonly);
	assert_false(store->view->readonly);
	assert_path(fs, store, NULL, "");
	assert_path(fs, store, "x", "x");
	assert_path(fs, voc, NULL, "data/voc");
	assert_int_equal(fs_node_get(fs, voc, "train", &a), 0);
	assert_int_equal(fs_node_get(fs, a, "img 1.jpg", &b), 0);
	assert_path(fs, b, NULL, "data/voc/train/img 1.jpg");
	fs_node_forget(fs, b, 1);
	fs_node_forget(fs, a, 1);
}

static void test_tree_lookup_twice_gives_the_same_node(void **state)
{
	struct fs *fs = *state;
	struct node *store = child(child(fs->root, "datastores"), "store");
	struct node *a, *again;

	assert_int_equal(fs_node_get(fs, store, "a", &a), 0);
	assert_int_equal(fs_node_get(fs, store, "a", &again), 0);
	assert_ptr_equal(a, again);
	assert_int_equal(a->nlookup, 2);
	fs_node_forget(fs, a, 2);
}

static void test_tree_rename_moves_the_whole_subtree(void **state)
{
	struct fs *fs = *state;
	struct node *store = child(child(fs->root, "datastores"), "store");
	struct node *dir, *file, *other;

	assert_int_equal(fs_node_get(fs, store, "dir", &dir), 0);
	assert_int_equal(fs_node_get(fs, dir, "file", &file), 0);
	assert_int_equal(fs_node_get(fs, store, "other", &other), 0);
	assert_int_equal(fs_node_renamed(fs, store, "dir", other, "moved", 0), 0);
	assert_path(fs, file, NULL, "other/moved/file");
	/* renamed over an existing name: the old node is detached */
	uint64_t gen = atomic_load(&fs->gen);
	assert_int_equal(fs_node_renamed(fs, other, "moved", store, "other", 0), 0);
	assert_path(fs, file, NULL, "other/file");
	/* and the moved node counts as changed: a listing read before holds the old one's attributes */
	assert_true(atomic_load(&dir->changed) > gen);
	char *path = NULL;
	assert_int_equal(fs_node_path(fs, other, NULL, &path), -ENOENT);
	fs_node_forget(fs, file, 1);
	fs_node_forget(fs, dir, 1);
	fs_node_forget(fs, other, 1);
}

static void test_tree_unlinked_node_has_no_path_and_a_new_lookup_is_new(void **state)
{
	struct fs *fs = *state;
	struct node *store = child(child(fs->root, "datastores"), "store");
	struct node *a, *b;
	char *path = NULL;

	assert_int_equal(fs_node_get(fs, store, "gone", &a), 0);
	fs_node_unlinked(fs, store, "gone");
	assert_int_equal(fs_node_path(fs, a, NULL, &path), -ENOENT);
	assert_int_equal(fs_node_get(fs, store, "gone", &b), 0);
	assert_ptr_not_equal(a, b);
	fs_node_forget(fs, a, 1);
	fs_node_forget(fs, b, 1);
}

static void test_tree_parent_outlives_its_forgotten_reference(void **state)
{
	struct fs *fs = *state;
	struct node *store = child(child(fs->root, "datastores"), "store");
	struct node *dir, *file;

	assert_int_equal(fs_node_get(fs, store, "d", &dir), 0);
	assert_int_equal(fs_node_get(fs, dir, "f", &file), 0);
	fs_node_forget(fs, dir, 1);	/* the kernel forgot the folder first */
	assert_path(fs, file, NULL, "d/f");
	fs_node_forget(fs, file, 1);	/* frees both; ASan checks */
	assert_int_equal(fs->hash_count, 0);
}

static void test_tree_attributes_apply_the_datastore_overrides(void **state)
{
	struct fs *fs = *state;
	struct node *store = child(child(fs->root, "datastores"), "store");
	struct stat st = { .st_ino = 42, .st_mode = S_IFDIR | 0700, .st_uid = 0 };

	fs_node_attr(store, &st);
	assert_int_equal(st.st_ino, ((uint64_t)1 << 48) | 42);
	assert_int_equal(st.st_mode, S_IFDIR | 0750);
	assert_int_equal(st.st_uid, 1234);
	st.st_mode = S_IFREG | 0777;
	fs_node_attr(store, &st);
	assert_int_equal(st.st_mode, S_IFREG | 0640);
	st.st_mode = S_IFLNK | 0777;
	fs_node_attr(store, &st);
	assert_int_equal(st.st_mode, S_IFLNK | 0777);
}

static void test_tree_stats_name_every_datastore(void **state)
{
	struct fs *fs = *state;
	char *buf = NULL;
	size_t len = 0;

	atomic_store(&fs->backends[0]->stats.bytes_read, 4096);
	assert_int_equal(fs_stats_content(fs, &buf, &len), 0);
	assert_non_null(strstr(buf, "datastore.store.type fake\n"));
	assert_non_null(strstr(buf, "datastore.store.bytes_read 4096\n"));
	assert_non_null(strstr(buf, "mount.views 3\n"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tree_has_the_design_folders_and_views, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tree_maps_view_paths_into_the_backend, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tree_lookup_twice_gives_the_same_node, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tree_rename_moves_the_whole_subtree, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_tree_unlinked_node_has_no_path_and_a_new_lookup_is_new, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tree_parent_outlives_its_forgotten_reference,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_tree_attributes_apply_the_datastore_overrides,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_tree_stats_name_every_datastore, setup,
						teardown),
	};

	if (backend_register(&be_fake_ops) < 0)
		return 1;
	return cmocka_run_group_tests_name("tree", tests, NULL, NULL);
}
