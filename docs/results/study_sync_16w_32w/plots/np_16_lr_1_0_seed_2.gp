set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/study_sync_16w_32w/accuracy_vs_epoch_np_16_lr_1_0_seed_2.png'
set title 'study_sync_16w_32w, np=16 lr=1.0 seed=2, each at its best model'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/study_sync_16w_32w/plots/np_16_lr_1_0_seed_2_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'bsp'
set output 'docs/results/study_sync_16w_32w/accuracy_vs_time_np_16_lr_1_0_seed_2.png'
set title 'study_sync_16w_32w, np=16 lr=1.0 seed=2, each at its best model'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/study_sync_16w_32w/plots/np_16_lr_1_0_seed_2_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'bsp'
set output 'docs/results/study_sync_16w_32w/accuracy_vs_bytes_np_16_lr_1_0_seed_2.png'
set title 'study_sync_16w_32w, np=16 lr=1.0 seed=2, each at its best model'
set xlabel 'MB sent per worker'
unset logscale x
plot 'docs/results/study_sync_16w_32w/plots/np_16_lr_1_0_seed_2_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'bsp'
