// libyaml 0.2 (<yaml.h>), the YAML 1.1 parser the configuration reader composes its nodes from. Everything it
// needs (the parser, its events, their marks and errors) imports as it is.
#ifndef CYAML_SHIM_H
#define CYAML_SHIM_H

#include <yaml.h>

#endif
