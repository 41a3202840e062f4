/* be_local.h - the local folder backend (be_local.c). */
#ifndef MLFS_BE_LOCAL_H
#define MLFS_BE_LOCAL_H

#include "backend.h"

extern const struct backend_ops be_local_ops;
extern const struct config_form be_local_form;	/* its keys and URLs: config.h */

#endif
