set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/fedavg/accuracy_vs_epoch_all.png'
set title 'fedavg_4w'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/fedavg/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'bsp_iid', \
     'docs/results/fedavg/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'bsp_dir05', \
     'docs/results/fedavg/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'fedavg_c025_iid', \
     'docs/results/fedavg/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'fedavg_c025_dir05', \
     'docs/results/fedavg/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'fedavg_c1_iid', \
     'docs/results/fedavg/plots/all_5.dat' using 1:2 with linespoints lw 2 pt 6 title 'fedavg_c1_dir05', \
     'docs/results/fedavg/plots/all_6.dat' using 1:2 with linespoints lw 2 pt 7 title 'fedavg_c025_iid_topk'
set output 'docs/results/fedavg/accuracy_vs_time_all.png'
set title 'fedavg_4w'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/fedavg/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'bsp_iid', \
     'docs/results/fedavg/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'bsp_dir05', \
     'docs/results/fedavg/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'fedavg_c025_iid', \
     'docs/results/fedavg/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'fedavg_c025_dir05', \
     'docs/results/fedavg/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'fedavg_c1_iid', \
     'docs/results/fedavg/plots/all_5.dat' using 3:2 with linespoints lw 2 pt 6 title 'fedavg_c1_dir05', \
     'docs/results/fedavg/plots/all_6.dat' using 3:2 with linespoints lw 2 pt 7 title 'fedavg_c025_iid_topk'
set output 'docs/results/fedavg/accuracy_vs_bytes_all.png'
set title 'fedavg_4w'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/fedavg/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'bsp_iid', \
     'docs/results/fedavg/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'bsp_dir05', \
     'docs/results/fedavg/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'fedavg_c025_iid', \
     'docs/results/fedavg/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'fedavg_c025_dir05', \
     'docs/results/fedavg/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'fedavg_c1_iid', \
     'docs/results/fedavg/plots/all_5.dat' using 4:2 with linespoints lw 2 pt 6 title 'fedavg_c1_dir05', \
     'docs/results/fedavg/plots/all_6.dat' using 4:2 with linespoints lw 2 pt 7 title 'fedavg_c025_iid_topk'
