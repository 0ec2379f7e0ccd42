set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/study_resnet20_8w/accuracy_vs_epoch_np_8_seed_1.png'
set title 'study_resnet20_8w, np=8 seed=1, each at its best lr'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/study_resnet20_8w/plots/np_8_seed_1_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'bsp', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'local_4', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'fedavg', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'dpsgd', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'topk_100x_ef'
set output 'docs/results/study_resnet20_8w/accuracy_vs_time_np_8_seed_1.png'
set title 'study_resnet20_8w, np=8 seed=1, each at its best lr'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/study_resnet20_8w/plots/np_8_seed_1_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'bsp', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'local_4', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'fedavg', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'dpsgd', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'topk_100x_ef'
set output 'docs/results/study_resnet20_8w/accuracy_vs_bytes_np_8_seed_1.png'
set title 'study_resnet20_8w, np=8 seed=1, each at its best lr'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/study_resnet20_8w/plots/np_8_seed_1_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'bsp', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'local_4', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'fedavg', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'dpsgd', \
     'docs/results/study_resnet20_8w/plots/np_8_seed_1_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'topk_100x_ef'
