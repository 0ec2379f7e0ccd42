set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output '/work/results/local_sgd_4w/accuracy_vs_epoch_all.png'
set title 'local_sgd_4w'
set xlabel 'epoch'
unset logscale x
plot '/work/results/local_sgd_4w/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'bsp', \
     '/work/results/local_sgd_4w/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'local_2', \
     '/work/results/local_sgd_4w/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'local_4', \
     '/work/results/local_sgd_4w/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'local_8', \
     '/work/results/local_sgd_4w/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'local_16'
set output '/work/results/local_sgd_4w/accuracy_vs_time_all.png'
set title 'local_sgd_4w'
set xlabel 'wall time (s)'
unset logscale x
plot '/work/results/local_sgd_4w/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'bsp', \
     '/work/results/local_sgd_4w/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'local_2', \
     '/work/results/local_sgd_4w/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'local_4', \
     '/work/results/local_sgd_4w/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'local_8', \
     '/work/results/local_sgd_4w/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'local_16'
set output '/work/results/local_sgd_4w/accuracy_vs_bytes_all.png'
set title 'local_sgd_4w'
set xlabel 'MB sent per worker'
set logscale x
plot '/work/results/local_sgd_4w/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'bsp', \
     '/work/results/local_sgd_4w/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'local_2', \
     '/work/results/local_sgd_4w/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'local_4', \
     '/work/results/local_sgd_4w/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'local_8', \
     '/work/results/local_sgd_4w/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'local_16'
