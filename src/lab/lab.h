/* lab.h - the lab: the commands of the tether tool that put the library
 * under load, faults or a simulated world rather than just use it (`tether
 * bench`, `tether sim`, `tether demo` and its --chaos soak). They live in
 * src/lab, apart from the commands of src/cli; the command's dispatch
 * (src/cli/main.c) reaches them through this header only
 * (docs/architecture.md). Like the rest of the tool they use the public
 * headers (include/) and the command's argument helpers (cli.h).
 *
 * Each entry point takes the subcommand's argv (argv[0] the command's
 * name, as a cli_command's run does) and returns an exit code of the
 * command (CLI_OK, CLI_FAIL, CLI_USAGE). */
#ifndef TETHER_LAB_H
#define TETHER_LAB_H

/* tether__lab_sim runs `tether sim storm` (storm.c, storm_world.c). */
int tether__lab_sim(int argc, char **argv);

/* tether__lab_bench runs `tether bench cycle` (bench.c) and `tether bench
 * query` (bench_query.c). */
int tether__lab_bench(int argc, char **argv);

/* tether__lab_demo runs `tether demo` and `tether demo --chaos` (demo.c,
 * demo_check.c, demo_svg.c on the scratch cluster of faults.c). */
int tether__lab_demo(int argc, char **argv);

/* tether__lab_demo_patroni runs `tether demo --patroni` (demo_patroni.c,
 * on a scratch cluster of scripts/patroni-cluster); tether__lab_demo hands
 * it a command line that holds --patroni. */
int tether__lab_demo_patroni(int argc, char **argv);

#endif
