/*
 * seed_specs.h - the platforms' own documented example specs, for the unit
 * tests that read them (the parser's mapping) and run them (the
 * scheduler's end rule).  From ../shared/seeds/, as the pages print them.
 */
#ifndef MLFS_SEED_SPECS_H
#define MLFS_SEED_SPECS_H

/* Kibernetika's execution template ("Task management"), its YAML indentation restored. */
#define SEED_KIBERNETIKA_TEMPLATE                                                         \
	"name: example\n"                                                                 \
	"resources:\n"                                                                    \
	"- workDir: $SRC_DIR\n"                                                           \
	"  command: python example.py --parameter_name {{ .parameter_value }}\n"          \
	"  default_volume_mapping: true\n"                                                \
	"  images:\n"                                                                     \
	"    cpu: kuberlab/tensorflow:cpu-36-1.7.0-full\n"                                \
	"    gpu: kuberlab/tensorflow:gpu-36-1.7.0-full\n"                                \
	"  name: worker\n"                                                                \
	"  replicas: 1\n"                                                                 \
	"  resources:\n"                                                                  \
	"    limits:\n"                                                                   \
	"      cpu: \"1\"\n"                                                              \
	"      memory: 8Gi\n"                                                             \
	"    requests:\n"                                                                 \
	"      cpu: 100m\n"                                                               \
	"      memory: 64Mi\n"                                                            \
	"  restartPolicy: Never\n"

#endif
