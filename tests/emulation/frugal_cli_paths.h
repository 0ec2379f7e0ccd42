// The frugal executable and the source tree, as the build gives them to the suites that run the
// real command (sweep_cli_test, sweep_dry_run_test).
#pragma once

#ifndef FRUGAL_CLI_PATH
#error "FRUGAL_CLI_PATH must name the frugal executable"
#endif
#ifndef FRUGAL_SOURCE_DIR
#error "FRUGAL_SOURCE_DIR must name the source tree"
#endif
